"""train/papers"""
