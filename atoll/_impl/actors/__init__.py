"""The Ray side: island actors, channel endpoints between them, driver-side handles."""
