"""One timing engine for every primitive."""
