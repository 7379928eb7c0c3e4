/**
 * Devices, streams and events.
 *
 * <p>A {@link org.dtorch.core.device.Device} names one accelerator or CPU slot of the mesh. A
 * {@link org.dtorch.core.device.DeviceStream} orders the work issued to a device and a
 * {@link org.dtorch.core.device.DeviceEvent} marks a point in a stream that another stream can wait for.
 * On CPU, kernels run synchronously on the calling thread, so streams and events are ordering
 * no-ops; the API has the shape of CUDA streams and events so that the GPU implementation slots in
 * without changing callers. Interprocess CUDA events ({@link org.dtorch.core.device.DeviceEvent#createInterprocess},
 * {@link org.dtorch.core.device.DeviceEvent#openIpc}) order a stream of one process after work of another.
 */
package org.dtorch.core.device;
