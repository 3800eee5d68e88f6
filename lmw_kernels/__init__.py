"""The Triton kernels, one family per module. The import name is ``lmw_kernels`` because Hugging Face's ``kernels``
distribution, which transformers requires, owns ``kernels`` (docs/architecture.md, "Import names and installs")."""
