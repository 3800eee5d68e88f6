"""What runs the document stages: the step interface and its counting runner (``steps``), the local, Ray and Dask
executors (``executor``), and the process pool whose workers may die or hang (``supervised``)."""
