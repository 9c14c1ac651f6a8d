"""Reading a run's job dirs as data: the tally's outcomes, slots and statistics."""
