"""Vision models shared by the papers that train or size CNNs: the DDL stall profiler, Dally's trace models and,
next, gradient-output sparsity in CNN backpropagation.

Public entry points:

- :mod:`.architectures` — ResNet and VGG stage tables, and the parameters of the published ImageNet models
  (ResNet, VGG, AlexNet, GoogLeNet) counted layer by layer;
- :mod:`.cnn` — :class:`.cnn.ResNet` and :class:`.cnn.VGG` for 28x28 images built from the same tables, and
  :func:`.cnn.build_cnn` by name.
"""
