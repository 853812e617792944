"""train/papers/metatool"""
