"""Built-in protocol dissectors, one subpackage each, plus helpers they share."""
