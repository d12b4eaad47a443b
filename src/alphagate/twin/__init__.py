"""The twin: an OpenAI-compatible server whose timing and acceptance come from the simulator."""
