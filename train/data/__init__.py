"""train/data"""
