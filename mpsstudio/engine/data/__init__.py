"""The data a run trains on: the built-in datasets (generated, downloaded), folders of class-subfolder images
(checked before any run), and the batch sources that bring uint8 samples to the device.

Owns: datasets, folder, shapes, downloads, batches. Uses: basics.
"""
