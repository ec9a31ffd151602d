"""Vision models and image data shared by the papers: CNNs for the DDL stall profiler, Dally's trace models, the
serving zoo and gradient output sparsity in CNN backpropagation; digit splits (MNIST, scikit-learn's digits); digit
canvases for AsymVLM's vision-language model.

Public entry points:

- :mod:`.architectures` — ResNet and VGG stage tables, and the parameters of the published ImageNet models
  (ResNet, VGG, AlexNet, GoogLeNet) counted layer by layer;
- :mod:`.cnn` — :class:`.cnn.ResNet` and :class:`.cnn.VGG` for 28x28 images built from the same tables,
  :class:`.cnn.LeNet`, and :func:`.cnn.build_cnn` by name;
- :mod:`.digits` — :func:`.digits.load_split`: MNIST or scikit-learn's digits, shuffled and split three ways;
- :mod:`.canvases` — canvases of real handwritten digits (scikit-learn's and MNIST's) and bar charts, questions
  whose answers are known, and an independent decoder of the pixels that checks them.
"""
