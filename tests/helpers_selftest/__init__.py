"""Self-tests of tests/helpers: the reference and the graph builders checked on hand-derived examples."""
