"""The OpenAI-compatible server (``syncheck serve``; needs the ``serve`` extra).

- :mod:`syncheck.serve.protocol`: the wire format and request validation;
- :mod:`syncheck.serve.scheduler`: admission, the bounded queue and turn-taking on the model;
- :mod:`syncheck.serve.generation`: one chat request (monitor, FOD, abstention), run as a task of the model thread;
- :mod:`syncheck.serve.app`: the FastAPI app;
- :mod:`syncheck.serve.browser` and :mod:`syncheck.serve.body`: safe by default (nothing a page of another origin can
  drive; bodies over the limit refused before they are read);
- :mod:`syncheck.serve.page`: the live page at ``/`` (its files in ``static/``).
"""
