"""Renderers: the terminal (rich), JSON and Markdown. Commands build results; renderers print."""
