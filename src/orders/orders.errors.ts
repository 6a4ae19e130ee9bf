import { BusinessOutcomeException } from '../http/problem';

export enum OrderErrorCode {
  NotCancelable = 'order_not_cancelable',
}

/** Only a pending order can be canceled: a business outcome, stored and replayed. */
export class OrderNotCancelableException extends BusinessOutcomeException {
  constructor(id: string, status: string) {
    super({
      status: 422,
      code: OrderErrorCode.NotCancelable,
      title: 'Order Not Cancelable',
      detail: `Order ${id} is ${status}; only a pending order with no payment in progress can be canceled.`,
    });
  }
}

