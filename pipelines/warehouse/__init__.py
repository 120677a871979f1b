"""Where data lands: dlt destinations, DuckDB connections and table helpers, and the SQL models' runner."""
