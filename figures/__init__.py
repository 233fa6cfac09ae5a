"""The course's pictures, drawn by code: one module per notebook (``nbNN.py``), each with a
``FIGURES`` table. ``scripts/draw_figures.py`` renders them and embeds each in its notebook's
markdown cell."""
