-- Customer 10 completed orders of $12.50 and $8.00; customer 11 returned theirs.
select customer_id, revenue
from {{ ref('customer_revenue') }}
where (customer_id = 10 and revenue <> 20.50)
   or customer_id = 11
