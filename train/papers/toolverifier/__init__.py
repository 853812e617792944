"""train/papers/toolverifier"""
