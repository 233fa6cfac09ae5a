"""The course's shared code, one module per topic. Importing it touches no hardware and prints
nothing."""

from helpers.course import VERSION

__version__ = VERSION
