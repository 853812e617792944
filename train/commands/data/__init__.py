"""train/commands/data"""
