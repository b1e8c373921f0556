"""MobileNet latents' pooling grids (frames, height, width), in a module of their own so that the latent
encoder (torch) and the part and experiment settings (no torch) share them without importing each other."""

#: at 64 px block 6's whole 8 x 8 map, where the shapes world's 9-18 px objects are 1-2 cells wide
#: (docs/results/wsv-latent-diagnosis.md: a reader trained on 3,000 scenes names shape 0.83 / colour 0.89
#: from it, 0.68 / 0.76 from the 4 x 4 grid used before)
MOBILENET_GRID = (8, 8, 8)
#: the grid of models and results made before MOBILENET_GRID (records without a grid had it)
LEGACY_MOBILENET_GRID = (8, 4, 4)
