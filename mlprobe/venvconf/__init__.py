"""The files mlprobe writes into a venv so that a recipe's settings reach every start of its Python:
the start-up hook (hook.py), the blocks in the activate scripts (activate.py) and the Jupyter kernel
spec (kernelspec.py), and where to find them (layout.py). Plain reading and writing of those files:
install writes them, doctor and verify read them; no stage is imported here."""
