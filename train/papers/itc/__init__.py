"""train/papers/itc"""
