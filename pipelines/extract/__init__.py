"""The dlt source (`source.py`) and what decides what to fetch next: the map schedule and the refresh budget."""
