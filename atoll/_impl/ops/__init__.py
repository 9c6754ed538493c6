"""The built-in operators, each a GraphStage, grouped by family."""
