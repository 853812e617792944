"""train/engine"""
