"""Finding memories: lexical scoring, the vector channel and its embedding backend."""
