"""train/commands/eval"""
