-- Revenue per customer in dollars, completed orders only.
select
    customer_id,
    sum(amount) as revenue
from {{ ref('orders') }}
where status = 'completed'
group by customer_id
