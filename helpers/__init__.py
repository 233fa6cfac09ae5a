"""The course's shared code, one module per topic; importing it touches no hardware, prints nothing."""

from helpers.course import VERSION

__version__ = VERSION
