"""``tooltrain data VERB``: ``convert`` (a source's files to canonical JSON Lines), ``validate`` (a canonical file
against its tools), ``stats`` (what a canonical file holds), ``render`` (conversations to token ids and loss labels)
and ``build`` (a recipe's training set and benchmark).

The work is done where it belongs: conversion in ``train.sources`` (``sources.convert``), checking in
``train.validate`` and ``train.data.validate_file``, counting in ``train.data.stats``, rendering in
``train.formats`` and ``train.data.rendered``. ``rejects`` is the group's shared helper (what ``convert`` and
``render`` print about the records they rejected), not a verb.
"""
