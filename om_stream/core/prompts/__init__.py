"""Observer and Reflector prompts in om-stream's own words, and the parsing of what the models answer."""
