"""mlprobe: which deep-learning stack can really use this hardware, how to get it, and does it
actually go faster?"""

__version__ = "0.1.0"
