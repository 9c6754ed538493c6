"""Sources and sinks at the edges: Spark (RayDP), Ray Datasets, Parquet."""
