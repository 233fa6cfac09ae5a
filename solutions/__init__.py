"""Reference solutions of the "Try it yourself" exercises, one module per notebook.

``solutions/nb00.py`` answers the exercises of ``00_devices_and_tensors``, and so on. They live
here, away from the notebooks, so that nobody reads them by accident: try an exercise first, and
let its check tell you what is wrong. ``tests/test_checks_nbNN.py`` runs each check against these
answers (they must pass) and against typical wrong answers (each must be refused with its message).
"""
