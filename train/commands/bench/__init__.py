"""train/commands/bench"""
