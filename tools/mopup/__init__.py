"""Running exactly a run's missing attempts: mop-up's plan, its harbor calls, its archive."""
