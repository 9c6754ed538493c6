"""The fused GraphInterpreter, island boundaries and the in-process island host."""
