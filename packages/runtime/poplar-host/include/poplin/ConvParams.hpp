// poplar-host: a CPU emulation of the public PopLibs API.
#ifndef poplin_ConvParams_hpp
#define poplin_ConvParams_hpp

#include <poplar/Type.hpp>

#include <cstddef>
#include <ostream>
#include <vector>

namespace poplin {

/// A convolution: batchSize x (numConvGroups * inputChannelsPerConvGroup)
/// channels of an input field, a kernel per output channel, and transforms
/// of the input, the kernel and the output (each per spatial dimension).
struct ConvParams {
  /// Applied in order: truncation, dilation (zeros between elements),
  /// padding, flip.
  struct InputTransform {
    std::vector<unsigned> truncationLower, truncationUpper, dilation, paddingLower, paddingUpper;
    std::vector<bool> flip;
    InputTransform() = default;
    explicit InputTransform(std::size_t numFieldDims);
    InputTransform(std::vector<unsigned> truncationLower, std::vector<unsigned> truncationUpper,
                   std::vector<unsigned> dilation, std::vector<unsigned> paddingLower,
                   std::vector<unsigned> paddingUpper, std::vector<bool> flip);
    friend bool operator==(const InputTransform &a, const InputTransform &b);
    friend bool operator!=(const InputTransform &a, const InputTransform &b) { return !(a == b); }
  };
  /// Applied in order: truncation, stride, padding.
  struct OutputTransform {
    std::vector<unsigned> truncationLower, truncationUpper, stride, paddingLower, paddingUpper;
    OutputTransform() = default;
    explicit OutputTransform(std::size_t numFieldDims);
    OutputTransform(std::vector<unsigned> truncationLower, std::vector<unsigned> truncationUpper,
                    std::vector<unsigned> stride, std::vector<unsigned> paddingLower,
                    std::vector<unsigned> paddingUpper);
    friend bool operator==(const OutputTransform &a, const OutputTransform &b);
    friend bool operator!=(const OutputTransform &a, const OutputTransform &b) { return !(a == b); }
  };

  poplar::Type inputType;
  poplar::Type outputType;
  std::size_t batchSize = 0;
  std::vector<std::size_t> inputFieldShape;
  std::vector<std::size_t> kernelShape;
  std::size_t inputChannelsPerConvGroup = 0;
  std::size_t outputChannelsPerConvGroup = 0;
  std::size_t numConvGroups = 1;
  InputTransform inputTransform;
  InputTransform kernelTransform;
  OutputTransform outputTransform;

  ConvParams() = default;
  ConvParams(poplar::Type dataType, std::size_t batchSize, std::vector<std::size_t> inputFieldShape,
             std::vector<std::size_t> kernelShape, std::size_t inputChannelsPerConvGroup,
             std::size_t outputChannelsPerConvGroup, std::size_t numConvGroups);
  ConvParams(poplar::Type inputType, poplar::Type outputType, std::size_t batchSize,
             std::vector<std::size_t> inputFieldShape, std::vector<std::size_t> kernelShape,
             std::size_t inputChannelsPerConvGroup, std::size_t outputChannelsPerConvGroup,
             std::size_t numConvGroups);
  ConvParams(poplar::Type inputType, poplar::Type outputType, std::size_t batchSize,
             std::vector<std::size_t> inputFieldShape, std::vector<std::size_t> kernelShape,
             std::size_t inputChannelsPerConvGroup, std::size_t outputChannelsPerConvGroup,
             std::size_t numConvGroups, InputTransform inputTransform, InputTransform kernelTransform,
             OutputTransform outputTransform);

  std::size_t getNumFieldDims() const { return inputFieldShape.size(); }
  std::size_t getBatchSize() const { return batchSize; }
  std::size_t getNumConvGroups() const { return numConvGroups; }
  std::size_t getNumInputChansPerConvGroup() const { return inputChannelsPerConvGroup; }
  std::size_t getNumOutputChansPerConvGroup() const { return outputChannelsPerConvGroup; }
  std::size_t getNumInputChans() const { return inputChannelsPerConvGroup * numConvGroups; }
  std::size_t getNumOutputChans() const { return outputChannelsPerConvGroup * numConvGroups; }
  std::size_t getInputSize(unsigned dim) const { return inputFieldShape[dim]; }
  const std::vector<std::size_t> &getInputFieldShape() const { return inputFieldShape; }
  unsigned getTruncatedInputSize(unsigned dim) const;
  unsigned getTruncatedKernelSize(unsigned dim) const;
  unsigned getTransformedInputSize(unsigned dim) const;
  unsigned getTransformedKernelSize(unsigned dim) const;
  std::size_t getUntransformedOutputSize(unsigned dim) const;
  std::size_t getOutputSize(unsigned dim) const;
  std::vector<std::size_t> getOutputFieldShape() const;
  /// Throws poputil::poplibs_error when the parameters are inconsistent.
  void validate() const;

  friend bool operator==(const ConvParams &a, const ConvParams &b);
  friend bool operator!=(const ConvParams &a, const ConvParams &b) { return !(a == b); }
};

std::ostream &operator<<(std::ostream &os, const ConvParams &p);

} // namespace poplin

#endif
