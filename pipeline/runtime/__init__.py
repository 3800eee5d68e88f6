"""What runs the document stages: the step interface and its counting runner (``steps``), the stage that runs a
chain of steps over each file (``document_stage``), and the process pool whose workers may die or hang
(``supervised``)."""
