"""Supervising a live run: reproduce, the bench's watch, shards, the governor, the watchdog."""
