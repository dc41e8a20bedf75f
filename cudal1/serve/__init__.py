"""The Ray Serve application: the policy behind an OpenAI-compatible chat API and an optimize-job
API. The request handling is plain Python (`cudal1.serve.service`, `cudal1.serve.jobs`), tested
without Serve; `cudal1.serve.app` is the one module that touches Ray Serve and FastAPI."""
