"""train/base"""
