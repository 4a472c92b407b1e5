package dev.adkservices.grpc;

import com.google.common.util.concurrent.FutureCallback;
import com.google.common.util.concurrent.Futures;
import com.google.common.util.concurrent.ListenableFuture;
import com.google.common.util.concurrent.MoreExecutors;
import io.grpc.stub.ClientCallStreamObserver;
import io.grpc.stub.ClientResponseObserver;
import io.reactivex.rxjava3.core.BackpressureStrategy;
import io.reactivex.rxjava3.core.Flowable;
import io.reactivex.rxjava3.core.FlowableEmitter;
import io.reactivex.rxjava3.core.Single;
import java.util.function.Supplier;

/**
 * grpc-java's asynchronous calls as RxJava sources. A call starts when the source is subscribed (so
 * each subscription, and each retry of it, is a new call) and is cancelled when the subscription is
 * disposed. No thread waits on a call.
 */
final class RxCalls {
  private RxCalls() {}

  static <T> Single<T> unary(Supplier<ListenableFuture<T>> call) {
    return Single.create(
        emitter -> {
          ListenableFuture<T> future = call.get();
          emitter.setCancellable(() -> future.cancel(true));
          Futures.addCallback(
              future,
              new FutureCallback<T>() {
                @Override
                public void onSuccess(T result) {
                  emitter.onSuccess(result);
                }

                @Override
                public void onFailure(Throwable error) {
                  emitter.tryOnError(error);
                }
              },
              MoreExecutors.directExecutor());
        });
  }

  /**
   * A server stream as a Flowable. Messages the subscriber has not requested yet are buffered on
   * the client.
   */
  static <Q, R> Flowable<R> serverStream(Q request, StreamCall<Q, R> call) {
    return Flowable.create(
        emitter -> call.start(request, new Observer<>(emitter)), BackpressureStrategy.BUFFER);
  }

  /** An asynchronous stub's server-streaming method. */
  @FunctionalInterface
  interface StreamCall<Q, R> {
    void start(Q request, io.grpc.stub.StreamObserver<R> observer);
  }

  private static final class Observer<Q, R> implements ClientResponseObserver<Q, R> {
    private final FlowableEmitter<R> emitter;

    Observer(FlowableEmitter<R> emitter) {
      this.emitter = emitter;
    }

    @Override
    public void beforeStart(ClientCallStreamObserver<Q> requestStream) {
      emitter.setCancellable(() -> requestStream.cancel("the subscriber cancelled", null));
    }

    @Override
    public void onNext(R value) {
      emitter.onNext(value);
    }

    @Override
    public void onError(Throwable error) {
      emitter.tryOnError(error);
    }

    @Override
    public void onCompleted() {
      emitter.onComplete();
    }
  }
}
