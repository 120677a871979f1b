"""The dlt source (`source.py`), the columns it declares (`columns.py`, from the API's spec) and what decides
what to fetch next: the map schedule and the refresh budget."""
