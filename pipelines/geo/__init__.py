"""Geometry: GeoJSON map features to Arrow/WKB (antimeridian split), GeoParquet, and the PNG route maps."""
