"""train/papers/toolgt"""
