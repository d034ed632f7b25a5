"""``python -m memroute.evals <dataset> --data PATH ...``: the eval command on its own."""

from memroute.evals.cli import main

main()
