from bench.workloads.make import main

main()
